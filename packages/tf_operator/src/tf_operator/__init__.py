"""tf_operator"""
