"""``python -m tests.third_head.evaluate ckpt_path=CKPT``: score a checkpoint of the third head."""

from core.training.commands.apps import evaluation_app
from tests.third_head.head import HEAD

main = evaluation_app(HEAD)

if __name__ == "__main__":
    main()
