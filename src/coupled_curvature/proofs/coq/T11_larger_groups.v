(* T11, invariants of larger groups, for every block size n.
   - the radial ratio ρ = wᵀHw / (wᵀg)² is invariant under EVERY invertible block action
     (T11_rho_invariant); every block-diagonal linear symmetry acts on a block by such an A (T1),
     including non-uniform neuron scalings, which are not conformal (T5);
   - the Newton decrement gᵀH⁻¹g is invariant under every invertible A when H is invertible
     (T11_newton_invariant); applied with n the total parameter count and A = T it is the
     statement for every linear symmetry T of the loss.  With H⁺ in place of H⁻¹ it is the same
     for invertible H (pinv_unit), and it fails for singular H (T7_witness_newton).
   The T10 remark (ρ undefined on scale-invariant blocks) and the bias-free ρ_l = Q/P² identity
   (T9) are not formalised here. *)
From mathcomp Require Import all_ssreflect all_algebra.
From CoupledCurvature Require Import Defs Common T01_transformation_law T04_invariance_group T07_pseudo_inverse.

Section T11.
Variable R : rcfType.
Variable n : nat.
Implicit Types (w g : 'cV[R]_n) (A H : 'M[R]_n).

(* ρ = wᵀHw / (wᵀg)² *)
Definition radial_ratio w g H : R := quad H w / dot w g ^+ 2.

(* gᵀH⁻¹g *)
Definition newton_decrement g H : R := quad (invmx H) g.

Theorem T11_rho_invariant A w g H : A \in unitmx ->
  radial_ratio (act_w A w) (act_g A g) (act_H A H) = radial_ratio w g H.
Proof. by move=> Au; rewrite /radial_ratio quad_act // dot_act. Qed.

Lemma invmx_act_H A H : A \in unitmx -> H \in unitmx ->
  invmx (act_H A H) = A *m invmx H *m A^T.
Proof.
move=> Au Hu; set K := act_H A H.
have hK : K *m (A *m invmx H *m A^T) = 1%:M.
  rewrite /K /act_H !mulmxA mulmxKV // mulmxK // -trmx_mul mulmxV //.
  exact: trmx1.
have Ku : K \in unitmx by case: (mulmx1_unit hK).
by rewrite -[RHS](mulKmx Ku) hK mulmx1.
Qed.

Theorem T11_newton_invariant A g H : A \in unitmx -> H \in unitmx ->
  newton_decrement (act_g A g) (act_H A H) = newton_decrement g H.
Proof.
move=> Au Hu; rewrite /newton_decrement invmx_act_H // /quad /act_g.
rewrite -!mulmxA (mulmxA A^T) -trmx_mul mulVmx // trmx1 mul1mx.
by rewrite dot_mulmx trmxK mulKmx.
Qed.

(* the same with the pseudo-inverse, for invertible H *)
Corollary T11_newton_invariant_pinv A g H : A \in unitmx -> H \in unitmx ->
  quad (pinv (act_H A H)) (act_g A g) = quad (pinv H) g.
Proof.
move=> Au Hu; have KU : act_H A H \in unitmx.
  by rewrite /act_H !unitmx_mul unitmx_tr !unitmx_inv Au Hu.
by rewrite !pinv_unit //; apply: T11_newton_invariant.
Qed.

End T11.

(* Non-vacuity: an invertible, non-conformal A (diag(2, 1) from T04) and an invertible H (I). *)
Lemma T11_nonvacuous (R : rcfType) :
  A21 R \in unitmx /\ ~ conformal (A21 R) /\ (1%:M : 'M[R]_2) \in unitmx.
Proof. by split; [exact: A21_unit | split; [exact: A21_not_conformal | exact: unitmx1]]. Qed.
