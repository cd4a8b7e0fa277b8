import sys

from trainpilot_tui.cli import main

sys.exit(main())
