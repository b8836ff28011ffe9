"""Running debates: the engine and its seats, the run plan, execution, prompts, context
fitting, and replaying recorded prompts."""
