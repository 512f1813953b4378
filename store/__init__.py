"""rooftop.store — where rooftop keeps things on disk.

Every path rooftop uses is decided in `locations`, so tests can point the
whole program at a temporary directory with one environment variable.
"""
