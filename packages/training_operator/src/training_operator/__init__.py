"""Every job operator of this project in one process, as Kubeflow's training-operator runs its
frameworks: ``training-operator run --enable-scheme tfjob,pytorchjob,mpijob``."""
