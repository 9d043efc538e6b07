"""The compiler: source, spans, diagnostics, parsing, resolution, checks and stratification."""
