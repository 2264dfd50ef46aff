"""Errors that reach the user as one line, never as a traceback."""


class UserError(Exception):
    """Bad input from the user: a missing file, an unknown task, malformed JSON.

    The CLI prints the message on one line to stderr and exits with code 2.
    """
