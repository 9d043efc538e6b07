"""Bundle loading, evaluation, sessions and the reference monitor."""
