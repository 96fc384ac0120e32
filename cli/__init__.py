"""The wf command line."""
