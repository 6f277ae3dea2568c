"""Training objectives that shape curvature: the CRR penalty and one training step for baseline, CRR,
SAM and ASAM (SAM and ASAM from the ``train`` extra, ``pytorch-optimizer``)."""
