"""`python -m pipeline.cli`: the `mms` command line without the installed script."""

from pipeline.cli import main

main()
