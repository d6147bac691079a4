import sys

from opmatrix.cli import main

sys.exit(main())
