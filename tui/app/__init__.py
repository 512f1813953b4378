"""The Textual app: `create_app` and its config, the panes (one per tab), widgets, typed messages."""

from rooftop.tui.app.app import TABS, AppConfig, RooftopApp, create_app

__all__ = ["TABS", "AppConfig", "RooftopApp", "create_app"]
