"""Image captioning with a CNN encoder and an LSTM decoder: Show, Attend and Tell
(show_attend_tell.py) on a ResNet-50 (resnet.py) pretrained on the corpus's own charts with
Barlow Twins (barlow_twins.py), the image-captioning row of Chart-to-Text's Table 4."""
