"""The app's tabs, one module each: Live, Roofline, What-if, Compare, History, LLM, Profile."""
