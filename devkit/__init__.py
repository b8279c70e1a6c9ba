"""Development and build tools: never deployed, never in a Lambda zip."""
