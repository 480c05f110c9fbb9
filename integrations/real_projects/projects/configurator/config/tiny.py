# a smaller, faster run: python train.py config/tiny.py
max_iters = 20
eval_interval = 10
learning_rate = 5e-2
