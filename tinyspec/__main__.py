"""`python -m tinyspec ...` is the `tinyspec` console script."""
import sys
from tinyspec.cli import main

sys.exit(main())
