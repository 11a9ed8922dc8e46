import sys

try:
    from core.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python is still importing: no traceback for that either
    print("error: interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
