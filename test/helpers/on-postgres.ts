// Imported first by each test/postgres/ wrapper: the hub tests it then imports run their hubs on a
// throwaway PostgreSQL (test/helpers/hub.ts startTestHub), stopped after the file.
import test from 'ava';
import { usePostgres } from './postgres.js';

process.env.ANET_TEST_HUB_DB = 'postgres';
usePostgres(test);
