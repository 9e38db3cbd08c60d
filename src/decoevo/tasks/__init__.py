"""Question sets, loaders, task specifications and splits."""
