"""``python -m tideline`` runs the CLI."""

from tideline._entry import main

main()
