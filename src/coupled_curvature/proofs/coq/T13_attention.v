(* T13, attention's symmetries, for every sequence length t, model width d, head width h and output
   width m, over any real closed field.  For one head with queries XW_Q, keys XW_K, values XW_V
   (X : t×d, W_Q W_K W_V : d×h) and its rows W_O (h×m) of the output projection:
   - `T13_logits`: W_Q -> W_Q A, W_K -> W_K A⁻ᵀ (any invertible A : h×h) leaves the logits
     (XW_Q)(XW_K)ᵀ unchanged, hence the attention pattern P = softmax(logits) and the output;
   - `T13_values`: W_V -> W_V B, W_O -> B⁻¹W_O (any invertible B) leaves P X W_V W_O unchanged, for
     every matrix P (the attention pattern);
   - `T13_heads_perm`: the heads' outputs O_i (t×h) concatenated in a permuted order, with W_O's row
     blocks permuted alike, give the same output, for any number k of heads and any permutation σ
     (an injective map of the head indices): Σ_i O_σ(i) W_σ(i) = Σ_i O_i W_i; `T13_two_heads_swap` is the same for two heads with block
     matrices: [O₂ O₁][W₂; W₁] = [O₁ O₂][W₁; W₂].
   - With T4: the weights of W_Q from one input coordinate (row r of W_Q, a block of h numbers) move
     as rᵀ -> Aᵀrᵀ under W_Q -> W_Q A, the block action of T1 with the matrix Aᵀ; `T13_query_row_D_iff`:
     D of that block is unchanged for every (w, g, H) iff A is conformal (T4_i_iii with Aᵀ, and
     AᵀA = c²I iff AAᵀ = c²I); `T13_key_row_D_iff`: the same for a row of W_K, which moves by A⁻¹;
     `T13_query_row_Dplus_iff`, `T13_key_row_Dplus_iff`: the same for D⁺ (T7_iff).
     Not formalised: the whole d×h block vec(W_Q) (action I ⊗ Aᵀ) and the fused tensors.
   - `T13_instance`: A = [2 1; 0 1] (invertible, not conformal), two tokens X = [1 0; 1 1], W_Q = I,
     W_K = diag(1, 2): the queries XW_Q move while the logits are unchanged, and (T4's witness) D of a
     query row drops at basis vectors w = e_i, g = e_j with H = I.  The other theorems have no hypothesis
     but invertibility (met by A) or injectivity (met by any permutation). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring.
From CoupledCurvature Require Import Defs Common T04_invariance_group T07_pseudo_inverse.

Section Attention.
Variable R : rcfType.

Theorem T13_logits t d h (X : 'M[R]_(t, d)) (WQ WK : 'M[R]_(d, h)) (A : 'M[R]_h) :
  A \in unitmx ->
  (X *m (WQ *m A)) *m (X *m (WK *m (invmx A)^T))^T = (X *m WQ) *m (X *m WK)^T.
Proof.
by move=> uA; rewrite !trmx_mul trmxK !mulmxA -(mulmxA _ A) mulmxV // mulmx1.
Qed.

Theorem T13_values t d h m (P : 'M[R]_t) (X : 'M[R]_(t, d)) (WV : 'M[R]_(d, h))
    (WO : 'M[R]_(h, m)) (B : 'M[R]_h) :
  B \in unitmx -> P *m X *m (WV *m B) *m (invmx B *m WO) = P *m X *m WV *m WO.
Proof. by move=> uB; rewrite !mulmxA -(mulmxA _ B) mulmxV // mulmx1. Qed.

Theorem T13_heads_perm k t h m (O : 'I_k -> 'M[R]_(t, h)) (W : 'I_k -> 'M[R]_(h, m))
    (s : 'I_k -> 'I_k) :
  injective s -> \sum_(i < k) O (s i) *m W (s i) = \sum_(i < k) O i *m W i.
Proof. by move=> si; rewrite [RHS](reindex_inj si). Qed.

Theorem T13_two_heads_swap t h m (O1 O2 : 'M[R]_(t, h)) (W1 W2 : 'M[R]_(h, m)) :
  row_mx O2 O1 *m col_mx W2 W1 = row_mx O1 O2 *m col_mx W1 W2.
Proof. by rewrite !mul_row_col addrC. Qed.

(* AᵀA = c²I gives AAᵀ = c²I, for a square A and c <> 0 *)
Lemma gram_tr n (A : 'M[R]_n) c : c != 0 -> A^T *m A = (c ^+ 2)%:M -> A *m A^T = (c ^+ 2)%:M.
Proof.
move=> c0 hA; have c2 : c ^+ 2 != 0 by rewrite expf_neq0.
have h1 : ((c ^+ 2)^-1 *: A^T) *m A = 1%:M.
  by rewrite -scalemxAl hA -scalemx1 scalerA mulVf // scale1r.
have := mulmx1C h1; rewrite -scalemxAr => /(congr1 (fun M : 'M[R]_n => c ^+ 2 *: M)).
by rewrite /= scalerA mulfV // scale1r scalemx1.
Qed.

Lemma conformal_tr n (A : 'M[R]_n) : conformal A^T <-> conformal A.
Proof.
suff imp (B : 'M[R]_n) : conformal B -> conformal B^T.
  by split=> [/imp|/imp //]; rewrite trmxK.
case=> c [c0 hB]; exists c; split => //; rewrite trmxK.
by apply: gram_tr => //; rewrite lt0r_neq0.
Qed.

Lemma conformal_inv_iff n (A : 'M[R]_n) : A \in unitmx -> conformal (invmx A) <-> conformal A.
Proof.
suff imp (B : 'M[R]_n) : B \in unitmx -> conformal B -> conformal (invmx B).
  move=> uA; have uA' : invmx A \in unitmx by rewrite unitmx_inv.
  split=> [/(imp _ uA')|/(imp _ uA) //].
  by rewrite invmxK.
move=> uB [c [c0 hB]]; exists c^-1; split; first by rewrite invr_gt0.
have hB' := gram_tr (lt0r_neq0 c0) hB.
have c0' := lt0r_neq0 c0.
rewrite (conformal_inv uB c0' hB).
have -> : (c ^- 2 *: B^T)^T = c ^- 2 *: B by rewrite linearZ /= trmxK.
rewrite -scalemxAl -scalemxAr hB' scalerA scale_scalar_mx; congr (_%:M).
by field.
Qed.

(* the row r of W_Q (h weights from one input coordinate), as a column vector, moves by Aᵀ *)
Lemma query_row_action d h (WQ : 'M[R]_(d, h)) (A : 'M[R]_h) (r : 'I_d) :
  (row r (WQ *m A))^T = A^T *m (row r WQ)^T.
Proof. by rewrite row_mul trmx_mul. Qed.

(* the row r of W_K moves by A⁻¹ under W_K -> W_K A⁻ᵀ *)
Lemma key_row_action d h (WK : 'M[R]_(d, h)) (A : 'M[R]_h) (r : 'I_d) :
  (row r (WK *m (invmx A)^T))^T = invmx A *m (row r WK)^T.
Proof. by rewrite row_mul trmx_mul trmxK. Qed.

Theorem T13_query_row_D_iff h (A : 'M[R]_h) : A \in unitmx ->
  invariant_under (@coupledD _ _) A^T <-> conformal A.
Proof.
move=> uA; rewrite -conformal_tr; apply: T4_i_iii; by rewrite unitmx_tr.
Qed.

Theorem T13_key_row_D_iff h (A : 'M[R]_h) : A \in unitmx ->
  invariant_under (@coupledD _ _) (invmx A) <-> conformal A.
Proof.
move=> uA; rewrite -(conformal_inv_iff uA); apply: T4_i_iii; by rewrite unitmx_inv.
Qed.

(* the same for D⁺ (T7_iff) *)
Theorem T13_query_row_Dplus_iff h (A : 'M[R]_h) : A \in unitmx ->
  invariant_under (@coupledDplus _ _) A^T <-> conformal A.
Proof.
move=> uA; rewrite -conformal_tr; apply: T7_iff; by rewrite unitmx_tr.
Qed.

Theorem T13_key_row_Dplus_iff h (A : 'M[R]_h) : A \in unitmx ->
  invariant_under (@coupledDplus _ _) (invmx A) <-> conformal A.
Proof.
move=> uA; rewrite -(conformal_inv_iff uA); apply: T7_iff; by rewrite unitmx_inv.
Qed.

End Attention.

Section Instance.
Variable R : rcfType.

(* A = [2 1; 0 1]: invertible, not conformal *)
Definition attA : 'M[R]_2 := \matrix_(i < 2, j < 2)
  (if (i : nat) == 0%N then (if (j : nat) == 0%N then 2%:R else 1) else (if (j : nat) == 0%N then 0 else 1)).
(* its inverse [1/2 −1/2; 0 1] *)
Definition attA_inv : 'M[R]_2 := \matrix_(i < 2, j < 2)
  (if (i : nat) == 0%N then (if (j : nat) == 0%N then 2%:R^-1 else - 2%:R^-1)
   else (if (j : nat) == 0%N then 0 else 1)).
(* two tokens X = [1 0; 1 1], W_Q = I, W_K = [1 0; 0 2] *)
Definition attX : 'M[R]_2 := \matrix_(i < 2, j < 2) (if ((i : nat) == 0%N) && ((j : nat) == 1%N) then 0 else 1).
Definition attWK : 'M[R]_2 := \matrix_(i < 2, j < 2) (if i == j then (if (i : nat) == 0%N then 1 else 2%:R) else 0).

Lemma attA_unit : attA \in unitmx.
Proof.
have h : attA *m attA_inv = 1%:M.
  apply/matrixP => i j; rewrite !mxE !big_ord_recl big_ord0 !mxE /=.
  have t0 : (2%:R : R) != 0 by rewrite pnatr_eq0.
  by case: i => [[|[|i]] hi] //; case: j => [[|[|j]] hj] //=; field.
by case: (mulmx1_unit h).
Qed.

Lemma attA_not_conformal : ~ conformal attA.
Proof.
case=> c [_ /(congr1 (fun M : 'M[R]_2 => M 0 1))].
rewrite !mxE !big_ord_recl big_ord0 !mxE /= => /eqP.
by rewrite mulr1 mul0r !addr0 mulr0n pnatr_eq0.
Qed.

Lemma attQ_moves : attX *m (1%:M *m attA) != attX *m 1%:M.
Proof.
apply/negP => /eqP/(congr1 (fun M : 'M[R]_2 => M 0 1)).
rewrite mul1mx mulmx1 !mxE !big_ord_recl big_ord0 !mxE /= => /eqP.
by rewrite mul1r mul0r !addr0 oner_eq0.
Qed.

Theorem T13_instance :
  [/\ attA \in unitmx, ~ conformal attA,
      attX *m (1%:M *m attA) *m (attX *m (attWK *m (invmx attA)^T))^T =
      attX *m 1%:M *m (attX *m attWK)^T,
      attX *m (1%:M *m attA) != attX *m 1%:M
    & exists i j : 'I_2,
        coupledD (act_w attA^T (e i)) (act_g attA^T (e j)) (act_H attA^T 1%:M) < coupledD (e i) (e j) 1%:M].
Proof.
split; [exact: attA_unit | exact: attA_not_conformal | exact: T13_logits attA_unit | exact: attQ_moves |].
apply: T4_witness_D; first by rewrite unitmx_tr attA_unit.
by rewrite conformal_tr; exact: attA_not_conformal.
Qed.

(* the hypothesis of T13_heads_perm met by a permutation that moves the heads: the swap of two heads *)
Lemma T13_heads_perm_instance : injective (@rev_ord 2) /\ rev_ord (0 : 'I_2) != 0.
Proof. by split; [exact: rev_ord_inj | apply/eqP => /(congr1 val)]. Qed.

End Instance.
