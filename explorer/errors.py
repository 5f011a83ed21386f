"""The one exception type the engine raises for bad input; UI and CLI turn it into a message."""


class ExplorerError(ValueError):
    """A problem the user can fix (bad input, bad file); its message is shown as is."""
