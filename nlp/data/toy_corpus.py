"""The three-sentence parallel corpus of the worked example.

Small enough to train on in seconds and to follow by hand: the first pair is the one the
walkthrough traces through every block of the Transformer.
"""

TOY_PAIRS: list[tuple[str, str]] = [
    ("when you play the game of thrones", "you win or you die"),
    ("winter is coming", "the night is dark and full of terrors"),
    ("a lannister always pays his debts", "the north remembers"),
]
