export PYTHONPATH=/work/wt/lead/src:/work/wt/lead TENURE_TEST_PG_URL=postgresql://postgres@127.0.0.1:5432/tenure_lead
