"""Every chartjax build is array_record unless `tfds build --file_format=...` says otherwise.

array_record is what random-access readers need (`tfds.data_source`, no TensorFlow: chartjax's
input pipeline, chartjax/data/sources.py); TFDS's own default is TFRecord, which can only be
streamed.
"""

from __future__ import annotations

DEFAULT_FILE_FORMAT = "array_record"


class ArrayRecordDefault:
    """Builder mixin (before the TFDS base class): the file format defaults to array_record."""

    def __init__(self, *, file_format=None, **kwargs):
        super().__init__(file_format=file_format or DEFAULT_FILE_FORMAT, **kwargs)
