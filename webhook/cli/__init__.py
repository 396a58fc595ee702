"""The numagate command line: one module per command."""
