"""rooftop.tui — everything a person sees: the command line, reports, charts, the app."""
