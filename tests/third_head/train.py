"""``python -m tests.third_head.train [overrides]``: train the third head (config ``third.yaml``)."""

from core.training.commands.apps import training_app
from tests.third_head.head import HEAD

main = training_app(HEAD)

if __name__ == "__main__":
    main()
