"""Reports: provenance of results, tables of rows."""
