"""The synchronous turn loop that ties the game, the agent and the managers together."""
