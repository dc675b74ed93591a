"""A TFJob's real training: TensorFlow's own TFConfigClusterResolver reads the operator's
TF_CONFIG, MultiWorkerMirroredStrategy connects the workers over gRPC, a collective all-reduce
of task_index+1 must give n(n+1)/2, then a linear model y = 3x + 2 is fitted with gradients
all-reduced across the workers, each on data of its own."""

import json

import numpy as np
import tensorflow as tf

resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
task_type, task_id = resolver.task_type, resolver.task_id
cluster = resolver.cluster_spec().as_dict()
print(
    f"TF-CONFIG task={task_type}:{task_id} cluster={json.dumps(cluster, sort_keys=True)}",
    flush=True,
)
strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
n = strategy.num_replicas_in_sync


@tf.function
def contribute():
    ctx = tf.distribute.get_replica_context()
    return ctx.all_reduce(tf.distribute.ReduceOp.SUM, tf.constant(float(task_id + 1)))


total = strategy.experimental_local_results(strategy.run(contribute))[0].numpy()
print(f"TF-ALLREDUCE task={task_type}:{task_id} replicas={n} sum={total:g}", flush=True)

with strategy.scope():
    w = tf.Variable(0.0, aggregation=tf.VariableAggregation.MEAN)
    b = tf.Variable(0.0, aggregation=tf.VariableAggregation.MEAN)
rng = np.random.RandomState(100 + task_id)
x = rng.uniform(-1, 1, 256).astype("float32")
y = (3 * x + 2 + 0.01 * rng.randn(256)).astype("float32")


@tf.function
def train_step():
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((w * x + b - y) ** 2)
        grads = tape.gradient(loss, [w, b])
        grads = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.MEAN, grads)
        w.assign_sub(0.2 * grads[0])
        b.assign_sub(0.2 * grads[1])
        return loss

    return strategy.run(step)


losses = [float(strategy.experimental_local_results(train_step())[0]) for _ in range(150)]
print(
    f"TF-TRAINED task={task_type}:{task_id} first_loss={losses[0]:.4f} "
    f"final_loss={losses[-1]:.6f} w={w.numpy():.4f} b={b.numpy():.4f}",
    flush=True,
)
