"""The files a result is written to: SVG and PNG charts, and a self-contained HTML report.

`files` checks where a file may go and writes it whole or not at all; `figure` draws a chart with
matplotlib (an optional extra, imported inside functions); `out` writes what a command shares.
"""
