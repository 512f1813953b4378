"""The text and charts both front ends show: Rich tables and prose, plotext charts, JSON. No textual."""
