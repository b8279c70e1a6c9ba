"""The LangGraph agent. Pure: no I/O adapters, no web or queue frameworks."""
