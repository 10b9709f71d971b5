import sys

from plugins.serving.server import run

sys.exit(run())
