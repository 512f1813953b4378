"""`rooftop` with no command: the Textual app."""

from __future__ import annotations

import argparse

from rooftop.models.catalog import lookup_device
from rooftop.tui.commands.common import _device_list
from rooftop.tui.services.context import store_profiles


def run_app(args: argparse.Namespace) -> int:
    """`rooftop` with no command: the Textual app."""
    if args.device is not None:
        _device_list(args.device)  # `rooftop -d ''`: refused like any other command's
        lookup_device(args.device, store_profiles(args.db, [args.device]))  # a bad id: one line, before the screen opens
    # deferred: the Textual app (textual, plotext: ~0.5 s of imports), only when the app opens
    from rooftop.tui.app import AppConfig, create_app

    app = create_app(AppConfig(device=args.device, db_path=getattr(args, "db", None), autostart=True))
    app.run()
    return app.return_code or 0  # 128 + the signal when SIGHUP / SIGTERM ended it; 1 after a crash
