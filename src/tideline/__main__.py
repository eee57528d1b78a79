"""``python -m tideline`` runs the CLI."""

from tideline.cli import main

main()
