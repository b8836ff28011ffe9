"""Reading and checking answers: answer protocols, kinds, the grade, the math verifier and
its worker process, reasoning splits and the judge's rubric."""
