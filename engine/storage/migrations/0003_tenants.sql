-- tenants (branch tenants): tenants are granted to projects through resource_grant (resource_type 'tenant').
ALTER TABLE resource_grant DROP CONSTRAINT IF EXISTS resource_grant_resource_type_check;
ALTER TABLE resource_grant ADD CONSTRAINT resource_grant_resource_type_check
    CHECK (resource_type IN ('datasource', 'alert_group', 'tenant'));
