"""Models and data: the data sets, the one model factory and architecture vocabulary, the one
training loop, and the on-disk cache of trained models."""
