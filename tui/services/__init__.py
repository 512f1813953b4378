"""What both front ends use and neither draws: the store context, the default device, measuring,
keeping a run as it goes. No textual, no rich."""
