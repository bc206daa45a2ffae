"""Image data: readers (CIFAR in :mod:`~vision.data.cifar`, any image folder in
:mod:`~vision.data.folder`, random images in :mod:`~vision.data.synthetic`), the datamodule they
share (:mod:`~vision.data.datamodule`), preprocessing and augmentation
(:mod:`~vision.data.transforms`, on the batch in :mod:`~vision.data.batch_augment`) and the batch
sized from the budget (:mod:`~vision.data.batch_size`)."""
