"""Reusable widgets: the roofline chart, a table that fits its width, dialogs and the help screen."""

from rooftop.tui.app.widgets.base import ErrorLine, device_options, refresh_select, watch_app
from rooftop.tui.app.widgets.field import TextField
from rooftop.tui.app.widgets.dialogs import HELP, Dialog, HelpScreen
from rooftop.tui.app.widgets.plot import DRAWERS, RooflinePlot
from rooftop.tui.app.widgets.table import Col, FitTable, cell_width, crop

__all__ = ["DRAWERS", "HELP", "Col", "Dialog", "ErrorLine", "FitTable", "HelpScreen", "RooflinePlot", "TextField",
           "cell_width", "crop", "device_options", "refresh_select", "watch_app"]
