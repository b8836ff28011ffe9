"""Voting: how one round's answers become the system's answer. Answers grouped by
equivalence (`groups`), ties drawn by seed (`ties`), the scoring rules that pick the system's
answer (`rules`, a registry plug-ins add to), and verl's bootstrap estimate of maj@K
(`maj_at_k`). Pure functions of graded answers: the engine, measure and training share them."""
