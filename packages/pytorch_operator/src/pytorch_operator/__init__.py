"""pytorch_operator"""
