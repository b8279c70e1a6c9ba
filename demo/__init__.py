"""The demo assistants, the default of `ASSISTANTS`: an example of a deployment's own module,
which Handoff reaches only through that setting."""
