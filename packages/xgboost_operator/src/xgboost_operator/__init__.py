"""xgboost_operator: the XGBoostJob operator."""
