"""paddle_operator: the PaddleJob operator."""
