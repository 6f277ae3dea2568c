"""Report assembly: Markdown, HTML (offline MathML) and LaTeX, written atomically."""
