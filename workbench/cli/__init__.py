"""The `ptxwb` command line: parse, call the library, print."""
